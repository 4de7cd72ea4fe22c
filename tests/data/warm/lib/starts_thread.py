"""Starts a thread at import: a fork of its importer would not have it."""

import threading
import time

threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
