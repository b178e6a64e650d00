"""Example deliveries shipped with the package (used by ``execsys demo``)."""
