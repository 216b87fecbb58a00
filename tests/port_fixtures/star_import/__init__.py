"""A trainer that gets ``torch`` and ``dist`` from ``from .utils import *`` (no import of its
own), as some research code does. Framework-neutral: tensors come from ``..tensors``."""
