"""Kernels under test, declared for the bridge.  Each module imports its
library lazily (inside the call), so that declaring it needs numpy alone and
a kernel whose library is missing declines every case with the reason."""
