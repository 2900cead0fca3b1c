"""The writer's machinery behind :class:`tbscope.SummaryWriter` (``tbscope._writer.api``, the class, with
its rich kinds in :mod:`.rich`): what its methods accept (:mod:`.values`), torch's low-level file
writer (:mod:`.file_writer`), where events go (:mod:`.sinks`) and the process-wide hooks that keep
them safe (:mod:`.lifecycle`)."""
