"""Everything that talks to Redis below the roles: connections, the Lua scripts and
their loader, error replies, the ACL.
"""
