"""The canvas: the node-editor scene and view, its items, layout, multi-node edits and find."""
