"""What a privacy claim is and what several of them add up to: the composition of claims
(:mod:`privaudit.claims.composition`) and the ledger of releases (:mod:`privaudit.claims.ledger`)."""
