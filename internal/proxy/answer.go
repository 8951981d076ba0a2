package proxy

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
)

// The node's answers are buffered between the node and the client, as
// nginx's proxy_buffering does (docs/config.md, "Answers buffered"): the
// body is read from the node as fast as the node sends it, into memory up
// to a bound per answer and in total, then into a temporary file up to a
// bound per answer and in total, and the client takes it as fast as it
// reads. The node's connection goes back to the pool once the node has
// sent the whole answer, however slow the client; only past every bound
// does an answer wait for its client, holding the node's connection as a
// streamed answer would (decision 211).

// The defaults of the answer buffers, those of config.toml's [server]
// table.
const (
	DefaultAnswerMemory      = 512 << 10
	DefaultAnswerMemoryTotal = 128 << 20
	DefaultAnswerDisk        = 1 << 30
	DefaultAnswerDiskTotal   = 4 << 30
)

// answerChunk is the piece an answer is read from the node in, and held in
// memory in.
const answerChunk = 32 << 10

// chunks are the answers' pieces of memory.
var chunks = sync.Pool{New: func() any { return new([answerChunk]byte) }}

// answerBudget is what every buffered answer may hold together, and what
// they hold now. It is safe for concurrent use.
type answerBudget struct {
	memPer, memTotal   int64
	diskPer, diskTotal int64
	dir                string
	log                *slog.Logger

	// mem and disk are the bytes held: chunks of memory, and the sizes of
	// the temporary files. spills counts the answers that went to a file,
	// waits those that waited for their client past every bound.
	mem, disk      *atomic.Int64
	spills, waits  *atomic.Uint64
	fileFailLogged atomic.Bool
}

// off reports whether answers are not buffered at all: read from the node
// as the client takes them.
func (b *answerBudget) off() bool { return b.memPer <= 0 && b.diskPer <= 0 }

// take takes n bytes of v's budget, within total; false when they do not
// fit.
func take(v *atomic.Int64, n, total int64) bool {
	if v.Add(n) <= total {
		return true
	}
	v.Add(-n)
	return false
}

// answer is the body of the node's answer on its way to the client: fill,
// a goroutine of its own, reads it from the node into memory chunks and a
// temporary file; Read gives it to the client in order. The exchange is
// released (its slot, its place in the pool) once both sides have ended:
// the node's (its body read whole, or broken off, or cut off because the
// client's side ended first) and the client's (exchange.finish). It is
// safe for one reader and fill.
type answer struct {
	x      *exchange
	budget *answerBudget
	mu     sync.Mutex
	cond   sync.Cond // data, room or an end

	// In memory, in order: chunks[0][off:] is next, the last chunk filled
	// up to tail.
	mem  []*[answerChunk]byte
	off  int
	tail int

	// The temporary file: its unread bytes are [fr, fw); it holds size
	// bytes of the disk budget. Whatever the file holds comes after what
	// memory holds.
	file     *os.File
	fr, fw   int64
	size     int64
	noFile   bool // the file could not be made
	reading  bool // Read is reading [fr, fw) of the file outside the lock
	nodeDone bool
	nodeErr  error // io.EOF: the body came whole
	// clientDone is set when the client's side has ended: what is left is
	// dropped.
	clientDone bool
	waited     bool
}

// startAnswer starts buffering the body of the node's answer, unless the
// buffers are off: x.upBody is then read as the client takes it.
func (x *exchange) startAnswer() {
	b := &x.h.answers
	if b.off() {
		return
	}
	a := &answer{x: x, budget: b}
	a.cond.L = &a.mu
	x.ans = a
	x.sides.Store(2)
	x.refs.Add(1) // fill's, dropped when it ends
	go a.fill()
}

// readAnswer reads the answer's body, from its buffers or straight from
// the node.
func (x *exchange) readAnswer(p []byte) (int, error) {
	if x.ans != nil {
		return x.ans.Read(p)
	}
	return x.upBody.Read(p)
}

// answerAtHand reports whether some of the answer's body can be read
// without waiting for the node.
func (x *exchange) answerAtHand() bool {
	if x.ans != nil {
		return x.ans.atHand()
	}
	return x.upBody.buffered() > 0
}

// fill reads the node's answer body until it ends, placing it in the
// buffers; then it ends the node's side.
func (a *answer) fill() {
	x := a.x
	buf := chunks.Get().(*[answerChunk]byte)
	var err error
	for {
		var n int
		n, err = x.upBody.Read(buf[:])
		if n > 0 && !a.place(buf[:n]) {
			// The client's side has ended: the rest is not wanted.
			if err == nil {
				err = errClientGone
			}
			break
		}
		if err != nil {
			break
		}
	}
	chunks.Put(buf)
	a.mu.Lock()
	a.nodeDone, a.nodeErr = true, err
	gone := a.clientDone
	a.cond.Broadcast()
	a.mu.Unlock()
	if err == io.EOF {
		err = nil // read whole: the connection may serve another request
	} else if gone {
		err = errClientGone
	}
	_ = x.upBody.CloseWithError(err)
	x.sideEnded()
	x.unref()
}

// place holds p for the client: in memory while the file holds nothing
// unread and the budgets allow, else in the file, else it waits for the
// client to take some. It is false when the client's side has ended.
func (a *answer) place(p []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(p) > 0 {
		if a.clientDone {
			return false
		}
		if a.fr == a.fw && !a.reading {
			if n := a.toMemory(p); n > 0 {
				p = p[n:]
				a.cond.Broadcast()
				continue
			}
		}
		if a.toFile(p) {
			a.cond.Broadcast()
			return true
		}
		if !a.waited {
			a.waited = true
			a.budget.waits.Add(1)
		}
		a.cond.Wait()
	}
	return true
}

// toMemory copies what it can of p into the last chunk and new ones, and
// returns how much. A new chunk is taken within the answer's bound and the
// total, but one chunk at a time is always allowed, so that an answer
// moves however full the others keep the total.
func (a *answer) toMemory(p []byte) int {
	n := 0
	for len(p) > 0 {
		if len(a.mem) == 0 || a.tail == answerChunk {
			held := int64(len(a.mem)) * answerChunk
			switch {
			case held+answerChunk <= a.budget.memPer && take(a.budget.mem, answerChunk, a.budget.memTotal):
			case len(a.mem) == 0 && a.fw == 0:
				a.budget.mem.Add(answerChunk)
			default:
				return n
			}
			a.mem = append(a.mem, chunks.Get().(*[answerChunk]byte))
			a.tail = 0
		}
		c := copy(a.mem[len(a.mem)-1][a.tail:], p)
		a.tail += c
		n += c
		p = p[c:]
	}
	return n
}

// toFile writes p at the end of the file's unread bytes, within the
// answer's bound and the total; false when it does not fit (or there is no
// file). a.mu is held; Read may be reading the bytes before a.fw.
func (a *answer) toFile(p []byte) bool {
	if a.noFile || a.budget.diskPer <= 0 {
		return false
	}
	end := a.fw + int64(len(p))
	if end > a.budget.diskPer {
		return false
	}
	if grow := end - a.size; grow > 0 {
		if !take(a.budget.disk, grow, a.budget.diskTotal) {
			return false
		}
		a.size = end
	}
	if a.file == nil {
		f, err := newTempFile(a.budget.dir)
		if err != nil {
			a.noFile = true
			a.budget.disk.Add(-a.size)
			a.size = 0
			if a.budget.fileFailLogged.CompareAndSwap(false, true) {
				a.budget.log.Warn("answers cannot spill to a temporary file: they wait for their clients past server.answer_memory (set server.answer_temp_dir)", "err", err)
			}
			return false
		}
		a.file = f
		a.budget.spills.Add(1)
	}
	if _, err := a.file.WriteAt(p, a.fw); err != nil {
		a.budget.log.Warn("a temporary file of an answer failed: the answer waits for its client", "err", err)
		a.noFile = true
		return false
	}
	a.fw = end
	return true
}

// newTempFile makes a temporary file in dir ("": the system's) and
// removes its name at once: it goes with its last descriptor, even when
// the process is killed.
func newTempFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "limiterd-answer-")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Read gives the client the answer's body in order: memory first, then the
// file; it waits for the node when neither holds anything, and returns the
// node's end (io.EOF, or the error that broke it off) once all is read.
func (a *answer) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if len(a.mem) > 0 {
			c := a.mem[0]
			end := answerChunk
			if len(a.mem) == 1 {
				end = a.tail
			}
			if a.off < end {
				n := copy(p, c[a.off:end])
				a.off += n
				if a.off == answerChunk || (len(a.mem) == 1 && a.off == a.tail && a.nodeDone) {
					a.dropChunk()
				}
				a.cond.Broadcast()
				return n, nil
			}
			if len(a.mem) > 1 {
				a.dropChunk()
				continue
			}
		}
		if a.fr < a.fw {
			start, end := a.fr, min(a.fw, a.fr+int64(len(p)))
			a.reading = true
			a.mu.Unlock()
			n, err := a.file.ReadAt(p[:end-start], start)
			a.mu.Lock()
			a.reading = false
			a.fr += int64(n)
			if a.fr == a.fw {
				a.fr, a.fw = 0, 0 // caught up: the file is written from its start again
			}
			a.cond.Broadcast()
			if n == 0 && err != nil {
				return 0, errors.Join(errAnswerFile, err)
			}
			return n, nil
		}
		if a.nodeDone {
			return 0, a.nodeErr
		}
		a.cond.Wait()
	}
}

// errAnswerFile: an answer's temporary file could not be read back.
var errAnswerFile = errors.New("an answer's temporary file")

// dropChunk gives the first chunk back. a.mu is held.
func (a *answer) dropChunk() {
	chunks.Put(a.mem[0])
	a.mem[0] = nil
	a.mem = a.mem[1:]
	a.off = 0
	if len(a.mem) == 0 {
		a.mem, a.tail = nil, 0
	}
	a.budget.mem.Add(-answerChunk)
}

// atHand reports whether Read would return without waiting for the node.
func (a *answer) atHand() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fr < a.fw || (len(a.mem) > 0 && (len(a.mem) > 1 || a.off < a.tail)) || a.nodeDone
}

// clientEnded ends the client's side: what the buffers hold is dropped,
// and, when the node is still sending, its exchange is cut off (the node's
// answer has begun: the node's side ends with the connection closed,
// docs/limiting.md, "In-flight release").
func (a *answer) clientEnded() {
	a.mu.Lock()
	a.clientDone = true
	for len(a.mem) > 0 {
		a.dropChunk()
	}
	for a.reading {
		a.cond.Wait()
	}
	a.closeFile()
	sending := !a.nodeDone
	a.cond.Broadcast()
	a.mu.Unlock()
	if sending {
		a.x.upBody.cut()
	}
}

// closeFile closes the temporary file and gives its disk back. a.mu is
// held.
func (a *answer) closeFile() {
	if a.file != nil {
		_ = a.file.Close()
		a.file = nil
	}
	a.budget.disk.Add(-a.size)
	a.size, a.fr, a.fw = 0, 0, 0
}

// sideEnded ends one side of an exchange whose answer is buffered; the
// second releases its in-flight slot.
func (x *exchange) sideEnded() {
	if x.sides.Add(-1) == 0 {
		x.d.Release()
	}
}
