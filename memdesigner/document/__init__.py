"""The document layer: Qt-free state of an open design that the window views and edits (its run
settings as an evented model). Above the engine, whose Settings it builds; below the window."""
