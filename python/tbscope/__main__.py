from tbscope.cli import main

main()
