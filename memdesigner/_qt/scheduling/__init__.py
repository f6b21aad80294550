"""When and on which thread work runs: the one background-work mechanism, UI-thread slices, idle GC."""
