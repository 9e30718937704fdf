package client

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/kvwire/kvwire/internal/projection"
	"github.com/kvwire/kvwire/memdx"
)

// Get with a projection: GetOptions.Project says what it does.

// projectionFlags are the common flags of a projection: JSON.
const projectionFlags = CommonFlagsJSON

// The projection is built and picked apart as JSON (package projection
// says why). The result says JSON (projectionFlags, DatatypeJSON) and its
// ContentAs decodes it with the client's Transcoder, as a plain Get's does.

// projectionError is the *KeyValueError of a projection that failed
// outside the lookup itself.
func (col *Collection) projectionError(key string, sentinel, cause error) error {
	return col.c.refused("Get", 0, col, key, sentinel, cause)
}

// getProjected is Get with opts.Project, and then, when not nil, taking
// its result (getThen). The shaping of the result, and then, are the
// operation's last steps (op.finish): their failure is the operation's.
func (col *Collection) getProjected(ctx context.Context, key string, project []string, p opParams, then func(GetResult) error) (GetResult, error) {
	plan, err := projection.NewPlan(project, MaxSubdocSpecs)
	if err != nil {
		e := col.projectionError(key, ErrInvalidArgument, err)
		col.c.refusedCall(ctx, "Get", memdx.OpSubdocMultiLookup, col, p.parent, e) // named as its lookup would be
		return GetResult{}, e
	}
	paths := plan.Specs()
	specs := make([]LookupInSpec, len(paths))
	for i, path := range paths {
		specs[i] = GetSpec(path, nil)
	}
	o, err := col.lookupInOp(ctx, "Get", key, specs, p, false, 0)
	if err != nil {
		return GetResult{}, err
	}
	var out GetResult
	o.cold = true // finish is a cold field
	o.finish = func(o *op) error {
		r, err := col.project(key, plan, len(project), o.lookupInResult())
		if err != nil {
			return err
		}
		out = r
		if then != nil {
			return then(r)
		}
		return nil
	}
	err = o.c.execute(ctx, o)
	putOp(o)
	return out, err
}

// project shapes the result of a projected Get of key (n paths, by plan)
// from its lookup's result r.
func (col *Collection) project(key string, plan projection.Plan, n int, r LookupInResult) (GetResult, error) {
	values := make([]json.RawMessage, n)
	if plan.Whole() {
		body, err := r.ValueAt(0)
		if err != nil {
			return GetResult{}, err
		}
		var sentinel error
		if values, sentinel, err = plan.FromDocument(body); err != nil {
			return GetResult{}, col.projectionError(key, sentinel, err)
		}
	} else {
		for i := range n {
			v, err := r.ValueAt(i)
			switch {
			case errors.Is(err, ErrPathNotFound):
			case err != nil:
				var se *SubdocError
				errors.As(err, &se)
				return GetResult{}, col.projectionError(key, se.Err, err)
			default:
				values[i] = v
			}
		}
	}
	out, err := plan.Build(values)
	if err != nil {
		return GetResult{}, err
	}
	return GetResult{Value: out, Cas: r.Cas, Flags: projectionFlags, Datatype: DatatypeJSON,
		RetryAttempts: r.RetryAttempts, RetryReasons: r.RetryReasons, transcoder: col.c.opts.Transcoder}, nil
}
