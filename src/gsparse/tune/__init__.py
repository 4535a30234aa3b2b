"""Choosing schedules by measurement: timing candidates (:mod:`.measure`) and searching a
space (:mod:`.search`)."""
