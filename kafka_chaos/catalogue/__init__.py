"""The catalogues of the ground floor: one record per kind of thing a run is made of
(``faults``: the nemesis packages; ``anomalies``: what the checkers find; ``backends``: the
names of the cluster backends). Data only: nothing of the project above, nothing heavy, so
that the settings model and every package can read them."""
