package proxy

import "time"

// PanicBeforeUpstream makes a Handler panic where it would call the node,
// standing for a bug of limiterd's own on the request's way.
func PanicBeforeUpstream(o *Options) {
	o.hook = func(point string) {
		if point == "upstream" {
			panic("a bug")
		}
	}
}

// PanicInRelay makes a Handler panic while it relays an answer's body,
// after the head was sent.
func PanicInRelay(o *Options) {
	o.hook = func(point string) {
		if point == "relay" {
			panic("a bug in the relay")
		}
	}
}

// ParkAfter makes a Handler park its idle connections after d.
func ParkAfter(d time.Duration) func(*Options) {
	return func(o *Options) { o.parkAfter = d }
}

// ParkAlone makes a Handler park each idle connection in a goroutine of
// its own, as it does where there is no epoll.
func ParkAlone(o *Options) { o.parkAlone = true }

// AnswerBytes returns the bytes the answers' buffers hold now: in memory
// and in temporary files.
func AnswerBytes(h *Handler) (mem, disk int64) {
	return h.Counts.AnswerMemory.Load(), h.Counts.AnswerDisk.Load()
}

// AnswerChunk is the piece an answer is held in memory in.
const AnswerChunk = answerChunk
