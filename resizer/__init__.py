"""The resizer: restores each elastic Job's size the moment its leader binds, and releases gated followers."""
