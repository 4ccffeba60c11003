"""cert-manager, simulated: issuers, certificates and CA injection (opt-in controller `cert-manager`)."""
