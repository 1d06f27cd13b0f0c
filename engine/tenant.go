package engine

import (
	"fmt"
)

// DefaultTenant is the tenant of an Engine that never names one, and of
// every row written before tenancy existed: such an Engine behaves as an
// installation without tenants.
const DefaultTenant = "default"

// TenantStore is a Store that keeps tenants apart (both stores of this
// module): every row it reads or writes belongs to one tenant, and a
// tenant sees, changes and learns nothing of another's rows. See
// Engine.ForTenant.
type TenantStore interface {
	Store
	// ForTenant returns the store bound to tenant (checked by CheckTenant),
	// with the receiver's options and connection.
	ForTenant(tenant string) Store
	// Tenant returns the tenant the store is bound to (DefaultTenant when
	// none was named).
	Tenant() string
}

// CheckTenant validates a tenant name, the one rule every path applies:
// non-empty, valid UTF-8 with no NUL and no control character, at most 255
// characters. Errors: ErrInvalidInput.
func CheckTenant(tenant string) error {
	if err := checkID("tenant", tenant, false); err != nil {
		return err
	}
	for _, r := range tenant {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: tenant contains a control character (%U)", ErrInvalidInput, r)
		}
	}
	return nil
}

// ForTenant returns an Engine whose every call sees and writes tenant's
// rows alone, with e's configuration; e is unchanged. Two tenants may use
// the same thread ids and checkpoint ids; a checkpoint of another tenant
// is ErrNotFound, as an unknown one is. The Engine returned shares e's
// store connection: close e, not it.
//
// Errors: ErrInvalidInput for a bad tenant name (see CheckTenant) or a
// store that does not keep tenants apart.
func (e *Engine) ForTenant(tenant string) (*Engine, error) {
	if err := CheckTenant(tenant); err != nil {
		return nil, fmt.Errorf("for tenant: %w", err)
	}
	ts, ok := e.base.(TenantStore)
	if !ok {
		return nil, fmt.Errorf("for tenant: %w: this engine's store (%T) does not keep tenants apart", ErrInvalidInput, e.base)
	}
	return e.withStore(ts.ForTenant(tenant)), nil
}

// Tenant returns the tenant e reads and writes: DefaultTenant unless e was
// made by ForTenant (or its store was bound to a tenant).
func (e *Engine) Tenant() string {
	if ts, ok := e.base.(TenantStore); ok {
		return ts.Tenant()
	}
	return DefaultTenant
}
