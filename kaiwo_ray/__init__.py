"""kaiwo-ray: a Ray-native reimplementation of the Kaiwo operator."""

__version__ = "0.1.0"
