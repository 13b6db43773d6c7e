"""LEIR names in the reference translator's order; the sequences live in ``leir/names.py``."""

from ..leir.names import INDEX_ALPHABET, TENSOR_ALPHABET, index_names, tensor_name

__all__ = ["INDEX_ALPHABET", "TENSOR_ALPHABET", "index_names", "tensor_name"]
