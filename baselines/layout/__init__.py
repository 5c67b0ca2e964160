"""The layout collections (layout:{xla,nlp}:{default,random}); layout code imports only
`baselines.core`, never `baselines.tiles`."""
