from oidc_provider.lib.claims import ScopeClaims


def userinfo(claims, user):
    claims.update(preferred_username=user.username, email=user.email, given_name=user.first_name,
                  family_name=user.last_name)
    return claims


class GroupsClaims(ScopeClaims):
    info_groups = ("Groups", "The teams you are in.")

    def scope_groups(self):
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}
