"""The admission service's workflows, each a plug-in of the submit driver."""
