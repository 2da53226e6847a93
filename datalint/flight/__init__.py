"""The flight recorder behind `datalint run`: sample a training's process tree once a second,
keep the series in SQLite, and say what went wrong when it ends badly.

`datalint.host` reads /proc, /sys and /dev/shm (pure readers over a root), `sampling` the GPU
and exit statuses, `store` writes the series (the recorder is its one writer), `diagnosis` turns a
finished record into the findings it reports, and `supervise` runs the command and drives the loop.
"""
