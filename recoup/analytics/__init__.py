"""Recovery analytics (`recovery`) and the dry-run replay of failures through a retry policy
(`replay`).

The subpackages are imported by name: the replay needs numpy (the `replay` extra) and the
recovery analytics must import without it.
"""
