"""Pure decisions of the controllers: observed children -> phase and conditions; desired -> actions.

No I/O here: the controller shells in `kaiwo_ray/controllers/` read the caches, call these
functions and carry out what they return.
"""
