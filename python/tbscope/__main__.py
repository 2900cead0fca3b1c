"""``python -m tbscope``: the same command line as the ``tbscope`` script."""

from tbscope._cli.main import main

if __name__ == "__main__":
    main()
