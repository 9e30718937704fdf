package client

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/kvwire/kvwire/internal/projection"
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

// getProjected is Get with opts.Project.
func (col *Collection) getProjected(ctx context.Context, key string, project []string, p opParams) (GetResult, error) {
	plan, err := projection.NewPlan(project, MaxSubdocSpecs)
	if err != nil {
		return GetResult{}, col.projectionError(key, ErrInvalidArgument, err)
	}
	paths := plan.Specs()
	specs := make([]LookupInSpec, len(paths))
	for i, path := range paths {
		specs[i] = GetSpec(path, nil)
	}
	o, err := col.lookupInOp("Get", key, specs, p, false, 0)
	if err != nil {
		return GetResult{}, err
	}
	r, err := run(ctx, o, (*op).lookupInResult)
	if err != nil {
		return GetResult{}, err
	}
	values := make([]json.RawMessage, len(project))
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
		for i := range project {
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
