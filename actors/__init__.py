"""Ray hosting of the kaiwo-ray operator: one named actor per controller (`controller.py`) and the
driver-side supervisor that starts, watches and stops them (`supervisor.py`). Importing this
package does not import Ray; its modules do."""
