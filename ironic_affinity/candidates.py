# Temporary alias while live.py moves to active_members (removed in the
# same series of commits).
from ironic_affinity.active_members import missing_from_group as not_members  # noqa: F401
from ironic_affinity.active_members import profiles as live_profiles  # noqa: F401
