"""Small, tested shims for third-party packages; see each module for what it papers over."""

from privaudit.compat.torchvision_cpu import compiled_ops_available, import_torchvision

__all__ = ["compiled_ops_available", "import_torchvision"]
