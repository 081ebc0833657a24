"""Thin DVC stage CLIs: parse paths, read typed params, call the library, write outputs atomically."""
