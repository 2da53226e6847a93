"""What the host gives this process, read from /proc, /sys and /dev/shm: its cgroup, CPUs, memory,
shared memory, processes and container.

One home for these readers: the scan engine (its default worker count, the memory left for
judging an index), `datalint doctor`, `datalint bench` and the flight recorder all read the host
through this package. Parsers are pure functions of a file's text; the readers open files only
through `procfs`, each under a root (or /proc) that tests point at fake trees. Standard library and
the ground (`datalint.units`) only, so importing any of it costs the engine nothing.
"""
