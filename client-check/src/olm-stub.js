// Stands in for @matrix-org/olm in the bundle: Hydrogen loads olm only when it is given olm's paths, and the
// check gives none (summon never joins encrypted rooms).
export default {};
