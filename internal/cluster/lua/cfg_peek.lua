-- limiterd: the shared live state's version and number of records, at
-- once: what an instance compares, each second, with those of its last
-- full read, before it reads the records again.
-- KEYS[1] ver, KEYS[2] state. Returns {version (0: none), records}.
return {tonumber(redis.call('GET', KEYS[1]) or '0'), redis.call('HLEN', KEYS[2])}
