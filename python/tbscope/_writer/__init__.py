"""The writer's machinery behind :class:`tbscope.SummaryWriter` (``tbscope.writer``): where
events go (:mod:`.sinks`) and the process-wide hooks that keep them safe (:mod:`.lifecycle`)."""
