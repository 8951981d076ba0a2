package config

import (
	"errors"
	"fmt"

	"github.com/limiterd/limiterd/limiter"
)

// Errors of this package, for errors.Is on a Load error.
var (
	// ErrUnknownKey is the Err of the problem of a key the configuration
	// does not have (a typo must not silently drop a limit).
	ErrUnknownKey = errors.New("unknown key")
	// ErrWrongType is the Err of the problem of a value of the wrong
	// type, such as a string where an integer is expected.
	ErrWrongType = errors.New("wrong type")
)

// A configuration problem is a *limiter.FieldError whose Field is the
// dotted configuration key, with 0-based list indices, such as
// "http_api.limiter.chunk.leaky_limit" or "routes.rule[2].paths[0]" (for
// a source that cannot be read or parsed, the file's path, with the line
// and column of a syntax error: "config.toml:3:7"), and whose Err is the
// underlying error, if any: ErrUnknownKey, ErrWrongType, a file system
// error (errors.Is(err, fs.ErrNotExist) works), a *limiter.PatternError.
// Load's error joins one per problem, each read "config: <key>:
// <problem>".

// wrap returns fe as this package reports it: "config: <key>: <problem>".
func wrap(fe *limiter.FieldError) error { return fmt.Errorf("config: %w", fe) }

// Errors returns the problems err holds, in order: err's own, or those an
// errors.Join (such as Load's) holds, at any depth. It returns nil for nil
// or an error with no *limiter.FieldError in it.
func Errors(err error) []*limiter.FieldError {
	var out []*limiter.FieldError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *limiter.FieldError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		default:
			var fe *limiter.FieldError
			if errors.As(err, &fe) {
				out = append(out, fe)
			}
		}
	}
	walk(err)
	return out
}

// problems collects the problems of a Load in the order they are found.
type problems struct {
	errs []*limiter.FieldError
}

// add records a problem with key.
func (p *problems) add(key, problem string) {
	p.errs = append(p.errs, &limiter.FieldError{Field: key, Problem: problem})
}

// addf records a formatted problem with key.
func (p *problems) addf(key, format string, args ...any) {
	p.add(key, fmt.Sprintf(format, args...))
}

// addErr records a problem with key and its underlying error.
func (p *problems) addErr(key, problem string, err error) {
	p.errs = append(p.errs, &limiter.FieldError{Field: key, Problem: problem, Err: err})
}

// err returns nil, or every problem joined.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = wrap(e)
	}
	return errors.Join(errs...)
}
