"""The SQLite index and everything stored in it: the one home of its schema, its writer and its reads.

Every wing (scan, training, report, diagnosis, flight, service) reaches the index through this package;
it imports nothing of datalint but the ground (`errors`, `files`, `text`, `units`).
"""
