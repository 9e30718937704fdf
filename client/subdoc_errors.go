package client

import (
	"strconv"

	"github.com/kvwire/kvwire/internal/kverr"
)

// Sub-document sentinels (names as gocb's). A LookupIn path fails with one
// of them in its result (LookupInResult.ValueAt, ContentAt); a MutateIn fails
// as a whole with the sentinel of the first path that failed, and its error
// holds a *SubdocError naming that path. The status policy maps the statuses
// behind them.
var (
	// ErrPathNotFound: the path does not exist in the document
	// (SUBDOC_PATH_ENOENT).
	ErrPathNotFound = kverr.ErrPathNotFound
	// ErrPathMismatch: the path treats a value as the wrong type (an object
	// as an array, a string as an object), or a counter or array operation
	// found a value it cannot work on (SUBDOC_PATH_MISMATCH).
	ErrPathMismatch = kverr.ErrPathMismatch
	// ErrPathInvalid: the path does not parse, or does not suit the
	// operation (SUBDOC_PATH_EINVAL).
	ErrPathInvalid = kverr.ErrPathInvalid
	// ErrPathTooBig: the path has too many components (SUBDOC_PATH_E2BIG).
	ErrPathTooBig = kverr.ErrPathTooBig
	// ErrPathTooDeep: the document is nested deeper than the server
	// handles (SUBDOC_PATH_E2DEEP).
	ErrPathTooDeep = kverr.ErrPathTooDeep
	// ErrPathExists: the path already exists (SUBDOC_PATH_EEXISTS): an
	// Insert spec of an existing path, an ArrayAddUnique of a value already
	// there.
	ErrPathExists = kverr.ErrPathExists
	// ErrValueInvalid: the value cannot be inserted there: not JSON, or
	// not a primitive for ArrayAddUnique (SUBDOC_VALUE_CANTINSERT).
	ErrValueInvalid = kverr.ErrValueInvalid
	// ErrValueTooDeep: inserting the value would nest the document too
	// deep (SUBDOC_VALUE_ETOODEEP).
	ErrValueTooDeep = kverr.ErrValueTooDeep
	// ErrDocumentNotJSON: a path operation on a document that is not JSON
	// (SUBDOC_DOC_NOTJSON).
	ErrDocumentNotJSON = kverr.ErrDocumentNotJSON
	// ErrNumberTooBig: a counter found a number outside int64
	// (SUBDOC_NUM_ERANGE).
	ErrNumberTooBig = kverr.ErrNumberTooBig
	// ErrXattrInvalidFlagCombo: a path flag that needs the xattr flag
	// without it (SUBDOC_XATTR_INVALID_FLAG_COMBO).
	ErrXattrInvalidFlagCombo = kverr.ErrXattrInvalidFlagCombo
	// ErrXattrInvalidKeyCombo: specs that reach more than one extended
	// attribute where the server allows one (SUBDOC_XATTR_INVALID_KEY_COMBO).
	ErrXattrInvalidKeyCombo = kverr.ErrXattrInvalidKeyCombo
	// ErrXattrUnknownMacro: an expanded value that is no known macro
	// (SUBDOC_XATTR_UNKNOWN_MACRO, SUBDOC_XATTR_UNKNOWN_VATTR_MACRO).
	ErrXattrUnknownMacro = kverr.ErrXattrUnknownMacro
	// ErrXattrUnknownVirtualAttribute: a lookup of a virtual attribute
	// ("$...") the server does not have (SUBDOC_XATTR_UNKNOWN_VATTR).
	ErrXattrUnknownVirtualAttribute = kverr.ErrXattrUnknownVirtualAttribute
	// ErrXattrCannotModifyVirtualAttribute: a mutation of a virtual
	// attribute (SUBDOC_XATTR_CANT_MODIFY_VATTR).
	ErrXattrCannotModifyVirtualAttribute = kverr.ErrXattrCannotModifyVirtualAttribute
	// ErrXattrInvalidOrder: an xattr spec after a body spec
	// (SUBDOC_INVALID_XATTR_ORDER). LookupIn and MutateIn refuse such a
	// list before sending it (ErrInvalidArgument and this).
	ErrXattrInvalidOrder = kverr.ErrXattrInvalidOrder
	// ErrDocumentAlreadyAlive: ReviveDocument of a document that is not
	// deleted (SUBDOC_CAN_ONLY_REVIVE_DELETED_DOCUMENTS).
	ErrDocumentAlreadyAlive = kverr.ErrDocumentAlreadyAlive
)

// SubdocError is the failure of one spec of a LookupIn or MutateIn: its
// position in the caller's list, its path, the status the server gave it
// and that status's sentinel (Err). errors.Is matches Err.
type SubdocError struct {
	// Index is the spec's position in the list passed to LookupIn or
	// MutateIn.
	Index int
	Path  string
	Xattr bool
	// Status is the path's status (StatusSubdocPathNotFound, ...).
	Status Status
	Err    error
}

func (e *SubdocError) Error() string {
	s := "sub-document spec " + strconv.Itoa(e.Index)
	if e.Xattr {
		s += " (xattr " + strconv.Quote(e.Path) + ")"
	} else {
		s += " (path " + strconv.Quote(e.Path) + ")"
	}
	// The status names the failure without repeating Err's text, which a
	// *KeyValueError holding this as its cause prints already.
	if e.Status != 0 {
		return s + ": " + e.Status.String()
	}
	if e.Err != nil {
		return s + ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the sentinel.
func (e *SubdocError) Unwrap() error { return e.Err }
