"""Settings for the test suite: the development defaults, always the embedded stack.

The suite runs embedded (in-memory channel layer and broker, in-process device host) on
whichever database DATABASE_URL names. REDIS_URL is kept aside as KAIROS_TEST_REDIS_URL
for the tests marked ``services``, which start the full stack themselves.
"""
import os

os.environ.setdefault("DEBUG", "1")
if "KAIROS_TEST_REDIS_URL" not in os.environ:
    os.environ["KAIROS_TEST_REDIS_URL"] = os.environ.pop("REDIS_URL", "")
else:
    os.environ.pop("REDIS_URL", None)

# Spot checks ask random steps: off in tests (and the stacks they start) unless a test
# turns them on, so a test's count of tickets does not depend on chance.
os.environ.setdefault("KAIROS_SPOT_CHECK", "0")
# Likewise refits: a long session that resolves many tickets would otherwise refit the
# calibrator later tests read; the refit tests turn them on.
os.environ.setdefault("KAIROS_REFIT_EVERY", "0")

from kairos_web.settings import *  # noqa: E402,F401,F403

# seed_demo hashes three passwords for nearly every test; PBKDF2's deliberate slowness
# (~0.7 s each on the shared CI cores) protects nothing in a throwaway test database.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
