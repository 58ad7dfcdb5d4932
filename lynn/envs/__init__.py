"""Lynn Gym environments, one sub-package per system."""
