"""The old home of :mod:`chatkit_trace.route.profiles` (before issue 15 step 3).

Adapter projects made by ``chatkit-trace new-adapter`` before then import
``load_profile`` from here; new code imports from :mod:`chatkit_trace.route`.
"""

from ..route.profiles import Profile, ProfileError, load_profile, parse_profile

__all__ = ["Profile", "ProfileError", "load_profile", "parse_profile"]
