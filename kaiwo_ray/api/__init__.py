"""Typed Kaiwo API: pydantic models of every Kaiwo kind, their loader and the CRDs generated from them.

Layering: this package imports nothing else from kaiwo_ray; renderers, reconcilers and the sandbox
import it. Wire names are camelCase (`model_dump(by_alias=True, exclude_none=True, mode="json")`,
or `.to_wire()`), Python names snake_case.
"""
