package cluster

import (
	"errors"
	"strings"
)

// entryErr is the error one entry of a decision batch answered, as Redis
// worded it (a redis.Error, classified as one). The other entries of the
// batch are not concerned.
type entryErr struct {
	msg  string
	keys []string
}

func (e *entryErr) Error() string { return e.msg }

// RedisError marks entryErr as an error Redis answered (redis.Error).
func (e *entryErr) RedisError() {}

// KeyError is the failure of one (peer, group)'s keys: a key of another
// type than the scripts write (WRONGTYPE), or a value no decision can
// have written (CORRUPT: a count that is not an integer, or negative). It
// fails the decisions of that key only, answered as cluster.on_failure
// says; the key is repaired (deleted: its next decision starts from a
// fresh state) and the breaker that protects every peer is not told.
type KeyError struct {
	// Keys are the Redis keys concerned.
	Keys []string
	// Msg is Redis's or the script's word on what is wrong.
	Msg string
}

func (e *KeyError) Error() string {
	return "key " + strings.Join(e.Keys, ", ") + ": " + e.Msg
}

// Corrupt reports whether the key holds a value no decision can have
// written (rather than a key of another type).
func (e *KeyError) Corrupt() bool { return strings.HasPrefix(e.Msg, corruptPrefix) }

// corruptPrefix begins the Msg of a KeyError for a corrupt value.
const corruptPrefix = "corrupt: "

// entryError returns the error of an entry that answered msg on keys: a
// *KeyError for a wrong type or a corrupt value, else an *entryErr.
func entryError(msg string, keys []string) error {
	// A Lua error raised from a redis.call carries the command's error;
	// one raised by the script itself may be prefixed by where it was.
	if i := strings.Index(msg, "WRONGTYPE"); i >= 0 {
		return &KeyError{Keys: keys, Msg: msg[i:]}
	}
	if i := strings.Index(msg, "CORRUPT "); i >= 0 {
		return &KeyError{Keys: keys, Msg: corruptPrefix + msg[i+len("CORRUPT "):]}
	}
	return &entryErr{msg: msg, keys: keys}
}

func isKeyError(err error) bool {
	var ke *KeyError
	return errors.As(err, &ke)
}

// keySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// its hash tag (what lies between the first '{' and the next '}', when
// not empty), or of the whole key, modulo 16384.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & 16383
}
