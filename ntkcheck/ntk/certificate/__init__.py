"""What proves a bound on the Gram: rounding radii of the float64 routes, the values the user
gave, the Arb and verified-Cholesky routes, and matrices made elsewhere."""
