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
	comps := make([]projection.Path, len(project))
	for i, p := range project {
		c, err := projection.Parse(p)
		if err != nil {
			return GetResult{}, col.projectionError(key, ErrInvalidArgument, err)
		}
		comps[i] = c
	}
	whole := len(project) > MaxSubdocSpecs
	var specs []LookupInSpec
	if whole {
		specs = []LookupInSpec{GetSpec("", nil)}
	} else {
		specs = make([]LookupInSpec, len(project))
		for i, p := range project {
			specs[i] = GetSpec(p, nil)
		}
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
	if whole {
		body, err := r.ValueAt(0)
		if err != nil {
			return GetResult{}, err
		}
		doc, err := projection.Decode(body)
		if err != nil {
			return GetResult{}, col.projectionError(key, ErrDocumentNotJSON, err)
		}
		values, err = projection.PickAll(doc, comps, project)
		if err != nil {
			sentinel := ErrPathMismatch
			if !errors.Is(err, ErrPathMismatch) {
				sentinel = ErrServerFailure
			}
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
	out, err := projection.Build(comps, values)
	if err != nil {
		return GetResult{}, err
	}
	return GetResult{Value: out, Cas: r.Cas, Flags: projectionFlags, Datatype: DatatypeJSON,
		RetryAttempts: r.RetryAttempts, RetryReasons: r.RetryReasons, transcoder: col.c.opts.Transcoder}, nil
}
