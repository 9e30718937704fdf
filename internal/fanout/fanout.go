// Package fanout runs one read per copy of a document at once, one
// goroutine each, and waits for every one before it returns, so that no
// goroutine outlives the call: the replica reads (GetAnyReplica,
// GetAllReplicas and their sub-document forms).
package fanout

import "context"

// First runs read for each of copies at once and returns the first answer
// without an error; the others are canceled and waited for. With none it
// returns every error.
func First[T any](ctx context.Context, copies []int, read func(context.Context, int) (T, error)) (T, []error) {
	n := len(copies)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		r   T
		err error
	}
	ch := make(chan answer, n)
	for _, i := range copies {
		go func() {
			r, err := read(ctx, i)
			ch <- answer{r, err}
		}()
	}
	var errs []error
	for i := range n {
		a := <-ch
		if a.err == nil {
			cancel()
			// Drain the rest so no goroutine outlives the call.
			for range n - i - 1 {
				<-ch
			}
			return a.r, nil
		}
		errs = append(errs, a.err)
	}
	var zero T
	return zero, errs
}

// All runs read for each of copies at once and returns every answer
// without an error, in the order of copies, and the errors of the others.
func All[T any](ctx context.Context, copies []int, read func(context.Context, int) (T, error)) ([]T, []error) {
	n := len(copies)
	res := make([]T, n)
	errs := make([]error, n)
	done := make(chan struct{}, n)
	for j, i := range copies {
		go func() {
			res[j], errs[j] = read(ctx, i)
			done <- struct{}{}
		}()
	}
	for range n {
		<-done
	}
	var out []T
	var failed []error
	for i := range res {
		if errs[i] == nil {
			out = append(out, res[i])
		} else {
			failed = append(failed, errs[i])
		}
	}
	return out, failed
}
