"""The writer's machinery behind :class:`tbscope.SummaryWriter` (``tbscope._writer.api``, the class): where
events go (:mod:`.sinks`) and the process-wide hooks that keep them safe (:mod:`.lifecycle`)."""
