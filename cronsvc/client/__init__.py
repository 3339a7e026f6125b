"""The Python API of a running fleet: the Client, the fleet reader and the models it
returns.
"""
