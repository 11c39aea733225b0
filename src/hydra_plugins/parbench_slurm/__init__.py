"""parbench's Hydra launcher plugins (Hydra only loads launchers from the hydra_plugins package)."""
