package config

import (
	"errors"
	"fmt"
)

// Errors of this package, for errors.Is on a Load error.
var (
	// ErrUnknownKey is the Err of an *Error for a key the configuration
	// does not have (a typo must not silently drop a limit).
	ErrUnknownKey = errors.New("unknown key")
	// ErrWrongType is the Err of an *Error for a value of the wrong type,
	// such as a string where an integer is expected.
	ErrWrongType = errors.New("wrong type")
)

// Error is one configuration problem. Load returns every problem it finds
// as one error joining *Error values (see Errors).
type Error struct {
	// Key is the dotted configuration key, with 0-based list indices, such
	// as "http_api.limiter.chunk.leaky_limit" or "routes.rule[2].paths[0]";
	// for a source that cannot be read or parsed, the file path (with the
	// line and column of a syntax error, "config.toml:3:7").
	Key string
	// Problem says what is wrong, for a person.
	Problem string
	// Err is the underlying error, if any: ErrUnknownKey, ErrWrongType, a
	// file system error (errors.Is(err, fs.ErrNotExist) works), a
	// *limiter.PatternError.
	Err error
}

// Error returns "config: <key>: <problem>".
func (e *Error) Error() string { return fmt.Sprintf("config: %s: %s", e.Key, e.Problem) }

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Errors returns the *Error values err holds, in order: err itself, or the
// errors an errors.Join (such as Load's) holds, at any depth. It returns nil
// for nil or an error with no *Error in it.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *Error:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		default:
			var ce *Error
			if errors.As(err, &ce) {
				out = append(out, ce)
			}
		}
	}
	walk(err)
	return out
}

// problems collects *Error values in the order they are found.
type problems struct {
	errs []*Error
}

// add records a problem with key.
func (p *problems) add(key, problem string) {
	p.errs = append(p.errs, &Error{Key: key, Problem: problem})
}

// addf records a formatted problem with key.
func (p *problems) addf(key, format string, args ...any) {
	p.add(key, fmt.Sprintf(format, args...))
}

// addErr records a problem with key and its underlying error.
func (p *problems) addErr(key, problem string, err error) {
	p.errs = append(p.errs, &Error{Key: key, Problem: problem, Err: err})
}

// err returns nil, or every problem joined.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}
