"""Looking inside a phasescope model (not records): learned compressor preferences."""
