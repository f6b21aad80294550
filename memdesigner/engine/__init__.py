"""The estimation engine: settings, the liveness simulation, reports, devices. No Qt."""
